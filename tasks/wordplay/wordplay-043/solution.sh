printf '%s\n' ssalg > answer.txt
