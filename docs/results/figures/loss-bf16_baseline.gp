# Loss: bf16_baseline (altgrad-host report). Redraw: cd into this folder, gnuplot loss-bf16_baseline.gp
set terminal pngcairo size 960,540 noenhanced
set output 'loss-bf16_baseline.png'
set title 'Loss: bf16_baseline'
set xlabel 'step'
set ylabel 'loss (nats/token)'
set grid
set key below
plot 'data/loss-bf16_baseline-0.dat' using 1:2 with lines lw 1.2 lc 1 title 'bf16_baseline-s1 train', \
     'data/loss-bf16_baseline-1.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 1 title 'bf16_baseline-s1 val', \
     'data/loss-bf16_baseline-2.dat' using 1:2 with lines lw 1.2 lc 2 title 'bf16_baseline-s2 train', \
     'data/loss-bf16_baseline-3.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 2 title 'bf16_baseline-s2 val', \
     'data/loss-bf16_baseline-4.dat' using 1:2 with lines lw 1.2 lc 3 title 'bf16_baseline-s42 train', \
     'data/loss-bf16_baseline-5.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 3 title 'bf16_baseline-s42 val'
