printf '%s\n' riahc > answer.txt
