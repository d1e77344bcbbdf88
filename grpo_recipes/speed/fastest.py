def rank(report, inp):
    return None
