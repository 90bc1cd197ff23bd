printf '%s\n' tekcor > answer.txt
