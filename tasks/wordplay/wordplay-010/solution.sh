printf '%s\n' duolc > answer.txt
