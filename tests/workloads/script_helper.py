"""A module function that script_class.py calls with a model of the script's own class."""


def apply(model, x):
    return model(x)
