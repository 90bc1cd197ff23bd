printf '%s\n' emalf > answer.txt
