# Validation loss: every run (altgrad-host report). Redraw: cd into this folder, gnuplot val_loss-all.gp
set terminal pngcairo size 960,540 noenhanced
set output 'val_loss-all.png'
set title 'Validation loss: every run'
set xlabel 'step'
set ylabel 'validation loss (nats/token)'
set grid
set key below
plot 'data/val_loss-all-0.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s1', \
     'data/val_loss-all-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s2', \
     'data/val_loss-all-2.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'bf16_baseline-s42', \
     'data/val_loss-all-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e0m7_uniform-s42', \
     'data/val_loss-all-4.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e1m6_postln-s42', \
     'data/val_loss-all-5.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e1m6_uniform-s42', \
     'data/val_loss-all-6.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s1', \
     'data/val_loss-all-7.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s2', \
     'data/val_loss-all-8.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e3m4_uniform-s42', \
     'data/val_loss-all-9.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e4m3_uniform-s42', \
     'data/val_loss-all-10.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s1', \
     'data/val_loss-all-11.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s2', \
     'data/val_loss-all-12.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e5m2_short-s42', \
     'data/val_loss-all-13.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e7m0_mantissa_shift-s42', \
     'data/val_loss-all-14.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 title 'e7m0_uniform-s42'
