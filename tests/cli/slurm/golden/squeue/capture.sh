#!/bin/bash
d=$1; mkdir -p $d; cd $d  # run as root on the Slurm testbed; jobs.json is scontrol.txt as corral JSON
date +%s > now
date +%s.%N > default.txt.now; squeue > default.txt
date +%s.%N > long.txt.now; squeue -l > long.txt
date +%s.%N > noheader.txt.now; squeue -h > noheader.txt
date +%s.%N > array.txt.now; squeue -r > array.txt
date +%s.%N > array_long.txt.now; squeue -r -l > array_long.txt
date +%s.%N > start.txt.now; squeue --start > start.txt
date +%s.%N > o_codes.txt.now; squeue -o "%i %j %u %T %t %M %l %D %R %P %C %b %S %e %V %r" > o_codes.txt
date +%s.%N > o_widths.txt.now; squeue -o "%.10i|%-10j|%10u|%5T|%.3t|%20R|%%|%C|%.4P|%-4j|" > o_widths.txt
date +%s.%N > o_more.txt.now; squeue -o "%A %a %k %m %f %q %Q %p %Z %o %E %N %L %y %h %O %H %I %J %z %x %w %K %F" > o_more.txt
date +%s.%N > o_i.txt.now; squeue -o "%i" > o_i.txt
date +%s.%N > o_literal.txt.now; squeue -o "jobs: %i name=%j %%done" > o_literal.txt
date +%s.%N > o_wide.txt.now; squeue -o "%.100i %.50j" > o_wide.txt
date +%s.%N > r_ids.txt.now; squeue -r -o "%i %A %a %F %K %j %T %r" > r_ids.txt
date +%s.%N > ids_collapsed.txt.now; squeue -o "%i %F %K %A" > ids_collapsed.txt
date +%s.%N > O_names.txt.now; squeue -O "JobID,Name,State,UserName,TimeUsed,TimeLimit,NumNodes,ReasonList,Partition,NumCPUs,tres-per-node,StartTime,EndTime,SubmitTime,Reason" > O_names.txt
date +%s.%N > O_widths.txt.now; squeue -O "JobID:5,Name:.10,State:20,UserName:.,Partition:3" > O_widths.txt
date +%s.%N > O_widths2.txt.now; squeue -O "JobID:5,Name:.10,State:20,UserName:.,Partition:3|" > O_widths2.txt
date +%s.%N > O_more.txt.now; squeue -O "JobArrayID,ArrayJobID,ArrayTaskID,Priority,MinMemory,Dependency,Nice,QOS,WorkDir,Command,MinCpus,NodeList,TimeLeft,STDOUT,GRES,tres-alloc,tres-per-job" > O_more.txt
date +%s.%N > S_i.txt.now; squeue -S i > S_i.txt
date +%s.%N > S_minus_t.txt.now; squeue -S -t > S_minus_t.txt
date +%s.%N > S_u_minus_i.txt.now; squeue -S u,-i > S_u_minus_i.txt
date +%s.%N > S_P.txt.now; squeue -S P > S_P.txt
date +%s.%N > S_M.txt.now; squeue -S M > S_M.txt
date +%s.%N > S_S.txt.now; squeue -S S > S_S.txt
date +%s.%N > S_minus_i.txt.now; squeue -S -i > S_minus_i.txt
date +%s.%N > S_j.txt.now; squeue -S j > S_j.txt
date +%s.%N > squeue.json.now; squeue --json > squeue.json 2>&1
scontrol show job -d > scontrol.txt
