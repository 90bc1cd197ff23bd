printf '%s\n' tenalp > answer.txt
