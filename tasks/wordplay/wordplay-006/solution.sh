printf '%s\n' rats > answer.txt
