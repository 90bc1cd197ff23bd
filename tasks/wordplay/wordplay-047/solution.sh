printf '%s\n' elttob > answer.txt
