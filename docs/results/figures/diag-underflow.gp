# Underflow rate (the largest of any quantized tensor) (altgrad-host report). Redraw: cd into this folder, gnuplot diag-underflow.gp
set terminal pngcairo size 960,540 noenhanced
set output 'diag-underflow.png'
set title 'Underflow rate (the largest of any quantized tensor)'
set xlabel 'step'
set ylabel 'underflow rate'
set grid
set key below
plot 'data/diag-underflow-0.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s1', \
     'data/diag-underflow-1.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s2', \
     'data/diag-underflow-2.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s42', \
     'data/diag-underflow-3.dat' using 1:2 with lines lw 1.2 title 'e0m7_uniform-s42', \
     'data/diag-underflow-4.dat' using 1:2 with lines lw 1.2 title 'e1m6_postln-s42', \
     'data/diag-underflow-5.dat' using 1:2 with lines lw 1.2 title 'e1m6_uniform-s42', \
     'data/diag-underflow-6.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s1', \
     'data/diag-underflow-7.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s2', \
     'data/diag-underflow-8.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s42', \
     'data/diag-underflow-9.dat' using 1:2 with lines lw 1.2 title 'e4m3_uniform-s42', \
     'data/diag-underflow-10.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s1', \
     'data/diag-underflow-11.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s2', \
     'data/diag-underflow-12.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s42', \
     'data/diag-underflow-13.dat' using 1:2 with lines lw 1.2 title 'e7m0_mantissa_shift-s42', \
     'data/diag-underflow-14.dat' using 1:2 with lines lw 1.2 title 'e7m0_uniform-s42'
