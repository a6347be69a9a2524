# Loss: e3m4_uniform against bf16_baseline (altgrad-host report). Redraw: cd into this folder, gnuplot loss-e3m4_uniform.gp
set terminal pngcairo size 960,540 noenhanced
set output 'loss-e3m4_uniform.png'
set title 'Loss: e3m4_uniform against bf16_baseline'
set xlabel 'step'
set ylabel 'loss (nats/token)'
set grid
set key below
plot 'data/loss-e3m4_uniform-0.dat' using 1:2 with lines lw 1.2 lc 1 title 'e3m4_uniform-s1 train', \
     'data/loss-e3m4_uniform-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 1 title 'e3m4_uniform-s1 val', \
     'data/loss-e3m4_uniform-2.dat' using 1:2 with lines lw 1.2 lc 2 title 'e3m4_uniform-s2 train', \
     'data/loss-e3m4_uniform-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 2 title 'e3m4_uniform-s2 val', \
     'data/loss-e3m4_uniform-4.dat' using 1:2 with lines lw 1.2 lc 3 title 'e3m4_uniform-s42 train', \
     'data/loss-e3m4_uniform-5.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 3 title 'e3m4_uniform-s42 val', \
     'data/loss-e3m4_uniform-6.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 4 dt 2 title 'bf16_baseline-s1 val (baseline)', \
     'data/loss-e3m4_uniform-7.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 5 dt 2 title 'bf16_baseline-s2 val (baseline)', \
     'data/loss-e3m4_uniform-8.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 6 dt 2 title 'bf16_baseline-s42 val (baseline)'
