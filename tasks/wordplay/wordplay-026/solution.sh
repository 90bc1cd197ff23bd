printf '%s\n' ragus > answer.txt
