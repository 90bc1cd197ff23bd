printf '%s\n' lraep > answer.txt
