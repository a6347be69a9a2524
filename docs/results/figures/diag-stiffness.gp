# Stiffness (mean S = 2^(floor(log2|w|) - M)) (altgrad-host report). Redraw: cd into this folder, gnuplot diag-stiffness.gp
set terminal pngcairo size 960,540 noenhanced
set output 'diag-stiffness.png'
set title 'Stiffness (mean S = 2^(floor(log2|w|) - M))'
set xlabel 'step'
set ylabel 'mean stiffness'
set grid
set key below
set logscale y 2
plot 'data/diag-stiffness-0.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s1', \
     'data/diag-stiffness-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s2', \
     'data/diag-stiffness-2.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s42', \
     'data/diag-stiffness-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e0m7_uniform-s42', \
     'data/diag-stiffness-4.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e1m6_postln-s42', \
     'data/diag-stiffness-5.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e1m6_uniform-s42', \
     'data/diag-stiffness-6.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s1', \
     'data/diag-stiffness-7.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s2', \
     'data/diag-stiffness-8.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s42', \
     'data/diag-stiffness-9.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e4m3_uniform-s42', \
     'data/diag-stiffness-10.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s1', \
     'data/diag-stiffness-11.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s2', \
     'data/diag-stiffness-12.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s42', \
     'data/diag-stiffness-13.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e7m0_mantissa_shift-s42', \
     'data/diag-stiffness-14.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e7m0_uniform-s42'
