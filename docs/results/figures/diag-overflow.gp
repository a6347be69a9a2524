# Overflow rate (the largest of any quantized tensor) (altgrad-host report). Redraw: cd into this folder, gnuplot diag-overflow.gp
set terminal pngcairo size 960,540 noenhanced
set output 'diag-overflow.png'
set title 'Overflow rate (the largest of any quantized tensor)'
set xlabel 'step'
set ylabel 'overflow rate'
set grid
set key below
plot 'data/diag-overflow-0.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s1', \
     'data/diag-overflow-1.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s2', \
     'data/diag-overflow-2.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s42', \
     'data/diag-overflow-3.dat' using 1:2 with lines lw 1.2 title 'e0m7_uniform-s42', \
     'data/diag-overflow-4.dat' using 1:2 with lines lw 1.2 title 'e1m6_postln-s42', \
     'data/diag-overflow-5.dat' using 1:2 with lines lw 1.2 title 'e1m6_uniform-s42', \
     'data/diag-overflow-6.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s1', \
     'data/diag-overflow-7.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s2', \
     'data/diag-overflow-8.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s42', \
     'data/diag-overflow-9.dat' using 1:2 with lines lw 1.2 title 'e4m3_uniform-s42', \
     'data/diag-overflow-10.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s1', \
     'data/diag-overflow-11.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s2', \
     'data/diag-overflow-12.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s42', \
     'data/diag-overflow-13.dat' using 1:2 with lines lw 1.2 title 'e7m0_mantissa_shift-s42', \
     'data/diag-overflow-14.dat' using 1:2 with lines lw 1.2 title 'e7m0_uniform-s42'
