# Loss: e7m0_uniform against bf16_baseline (altgrad-host report). Redraw: cd into this folder, gnuplot loss-e7m0_uniform.gp
set terminal pngcairo size 960,540 noenhanced
set output 'loss-e7m0_uniform.png'
set title 'Loss: e7m0_uniform against bf16_baseline'
set xlabel 'step'
set ylabel 'loss (nats/token)'
set grid
set key below
plot 'data/loss-e7m0_uniform-0.dat' using 1:2 with lines lw 1.2 lc 1 title 'e7m0_uniform-s42 train', \
     'data/loss-e7m0_uniform-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 1 title 'e7m0_uniform-s42 val', \
     'data/loss-e7m0_uniform-2.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 2 dt 2 title 'bf16_baseline-s1 val (baseline)', \
     'data/loss-e7m0_uniform-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 3 dt 2 title 'bf16_baseline-s2 val (baseline)', \
     'data/loss-e7m0_uniform-4.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 4 dt 2 title 'bf16_baseline-s42 val (baseline)'
