printf '%s\n' nomel > answer.txt
