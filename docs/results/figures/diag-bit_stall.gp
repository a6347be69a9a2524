# Bit-stall rate (fraction of weight elements unchanged since the last measurement) (altgrad-host report). Redraw: cd into this folder, gnuplot diag-bit_stall.gp
set terminal pngcairo size 960,540 noenhanced
set output 'diag-bit_stall.png'
set title 'Bit-stall rate (fraction of weight elements unchanged since the last measurement)'
set xlabel 'step'
set ylabel 'bit-stall rate'
set grid
set key below
plot 'data/diag-bit_stall-0.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s1', \
     'data/diag-bit_stall-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s2', \
     'data/diag-bit_stall-2.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s42', \
     'data/diag-bit_stall-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e0m7_uniform-s42', \
     'data/diag-bit_stall-4.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e1m6_postln-s42', \
     'data/diag-bit_stall-5.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e1m6_uniform-s42', \
     'data/diag-bit_stall-6.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s1', \
     'data/diag-bit_stall-7.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s2', \
     'data/diag-bit_stall-8.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s42', \
     'data/diag-bit_stall-9.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e4m3_uniform-s42', \
     'data/diag-bit_stall-10.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s1', \
     'data/diag-bit_stall-11.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s2', \
     'data/diag-bit_stall-12.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s42', \
     'data/diag-bit_stall-13.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e7m0_mantissa_shift-s42', \
     'data/diag-bit_stall-14.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e7m0_uniform-s42'
