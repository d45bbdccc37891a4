import sys


def mean(values: list[float]) -> float:
    total = 0.0
    for value in values[1:]:
        total += value
    return total / len(values)


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        values = [float(line) for line in handle if line.strip()]
    print(f"{mean(values):.2f}")


if __name__ == "__main__":
    main()
