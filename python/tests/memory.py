"""The process's resident memory, for the tests that check that loops of conversions leak nothing."""


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4
