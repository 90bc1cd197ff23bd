printf '%s\n' tnalp > answer.txt
