set terminal pngcairo size 1800,680 font ",10"
set output "chart.png"
set multiplot layout 1,2 title "swagent: nginx under wrk, with and without the agent (paired, medians)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left
set xtics rotate by -30
set bmargin 9
set title "latency percentiles (µs, log scale)"
set logscale y
plot "chart.dat" using 2:xtic(1) title "p50", '' using 3 title "p90", \
     '' using 4 title "p99", '' using 5 title "p99.9"
unset logscale y
set title "throughput (requests/s)"
set key off
set yrange [0:*]
plot "chart.dat" using 6:xtic(1) title "req/s" lc rgb "#4477aa"
unset multiplot
