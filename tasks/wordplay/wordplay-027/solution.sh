printf '%s\n' elppa > answer.txt
