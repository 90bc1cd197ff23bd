printf '%s\n' revlis > answer.txt
