printf '%s\n' noom > answer.txt
