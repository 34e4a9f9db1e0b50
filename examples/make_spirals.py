"""Regenerate examples/data/spirals.csv, the small dataset the demo trains on: three
interleaved spirals in 2-d, 300 points per class, with a little noise (seeded)."""

import pathlib

import numpy as np


def main() -> None:
    rng = np.random.default_rng(2016)
    rows = []
    per_class, classes = 300, 3
    for c in range(classes):
        r = np.linspace(0.05, 1.0, per_class)
        theta = np.linspace(c * 4.2, (c + 1) * 4.2, per_class) + rng.normal(0, 0.2, per_class)
        for x, y in zip(r * np.sin(theta), r * np.cos(theta)):
            rows.append(f"{x:.6f},{y:.6f},{c}")
    out = pathlib.Path(__file__).with_name("data") / "spirals.csv"
    out.write_text("x,y,label\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
