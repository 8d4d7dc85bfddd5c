"""A program that never reaches the function: it waits on a lock nobody releases."""

import threading


def step():
    return 1


if __name__ == "__main__":
    blocked = threading.Lock()
    blocked.acquire()
    blocked.acquire()  # the program hangs here
    step()
