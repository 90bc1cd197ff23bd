printf '%s\n' retaw > answer.txt
