printf '%s\n' repap > answer.txt
