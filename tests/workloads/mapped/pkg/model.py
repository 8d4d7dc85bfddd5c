def forward(x, scale):
    return x * scale
