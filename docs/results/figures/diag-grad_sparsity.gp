# Gradient sparsity (fraction of gradient elements near zero) (altgrad-host report). Redraw: cd into this folder, gnuplot diag-grad_sparsity.gp
set terminal pngcairo size 960,540 noenhanced
set output 'diag-grad_sparsity.png'
set title 'Gradient sparsity (fraction of gradient elements near zero)'
set xlabel 'step'
set ylabel 'gradient sparsity'
set grid
set key below
plot 'data/diag-grad_sparsity-0.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s1', \
     'data/diag-grad_sparsity-1.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s2', \
     'data/diag-grad_sparsity-2.dat' using 1:2 with lines lw 1.2 title 'bf16_baseline-s42', \
     'data/diag-grad_sparsity-3.dat' using 1:2 with lines lw 1.2 title 'e0m7_uniform-s42', \
     'data/diag-grad_sparsity-4.dat' using 1:2 with lines lw 1.2 title 'e1m6_postln-s42', \
     'data/diag-grad_sparsity-5.dat' using 1:2 with lines lw 1.2 title 'e1m6_uniform-s42', \
     'data/diag-grad_sparsity-6.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s1', \
     'data/diag-grad_sparsity-7.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s2', \
     'data/diag-grad_sparsity-8.dat' using 1:2 with lines lw 1.2 title 'e3m4_uniform-s42', \
     'data/diag-grad_sparsity-9.dat' using 1:2 with lines lw 1.2 title 'e4m3_uniform-s42', \
     'data/diag-grad_sparsity-10.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s1', \
     'data/diag-grad_sparsity-11.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s2', \
     'data/diag-grad_sparsity-12.dat' using 1:2 with lines lw 1.2 title 'e5m2_short-s42', \
     'data/diag-grad_sparsity-13.dat' using 1:2 with lines lw 1.2 title 'e7m0_mantissa_shift-s42', \
     'data/diag-grad_sparsity-14.dat' using 1:2 with lines lw 1.2 title 'e7m0_uniform-s42'
