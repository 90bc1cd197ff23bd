# TODO: vendored copy, ignore
def parse(s):
    return eval(s)  # FIXME: unsafe
