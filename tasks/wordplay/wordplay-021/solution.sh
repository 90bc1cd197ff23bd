printf '%s\n' esroh > answer.txt
