# Loss: e5m2_short against bf16_baseline (altgrad-host report). Redraw: cd into this folder, gnuplot loss-e5m2_short.gp
set terminal pngcairo size 960,540 noenhanced
set output 'loss-e5m2_short.png'
set title 'Loss: e5m2_short against bf16_baseline'
set xlabel 'step'
set ylabel 'loss (nats/token)'
set grid
set key below
plot 'data/loss-e5m2_short-0.dat' using 1:2 with lines lw 1.2 lc 1 title 'e5m2_short-s1 train', \
     'data/loss-e5m2_short-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 1 title 'e5m2_short-s1 val', \
     'data/loss-e5m2_short-2.dat' using 1:2 with lines lw 1.2 lc 2 title 'e5m2_short-s2 train', \
     'data/loss-e5m2_short-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 2 title 'e5m2_short-s2 val', \
     'data/loss-e5m2_short-4.dat' using 1:2 with lines lw 1.2 lc 3 title 'e5m2_short-s42 train', \
     'data/loss-e5m2_short-5.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 3 title 'e5m2_short-s42 val', \
     'data/loss-e5m2_short-6.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 4 dt 2 title 'bf16_baseline-s1 val (baseline)', \
     'data/loss-e5m2_short-7.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 5 dt 2 title 'bf16_baseline-s2 val (baseline)', \
     'data/loss-e5m2_short-8.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 6 dt 2 title 'bf16_baseline-s42 val (baseline)'
