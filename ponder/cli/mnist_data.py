"""python -m ponder data [--download] [--data-dir D]: where MNIST is read from and whether it is there; with
--download, fetch it there with torchvision when it is not (the explorer's download button does the same)."""
from __future__ import annotations

from pathlib import Path

from ..data import MNIST_FILES, default_data_dir, load_mnist


def present(root: Path) -> bool:
    """The four MNIST files are in root/MNIST/raw, as .gz or decompressed."""
    raw = root / "MNIST" / "raw"
    return all((raw / f).is_file() or (raw / f"{f}.gz").is_file() for f in MNIST_FILES)


def cmd_data(args) -> int:
    """Print where MNIST is and its sizes; 0 when it is there (after --download fetched it), else 1 with what to
    do. A download that fails is a DataError: one line, saying why."""
    root = Path(args.data_dir or default_data_dir()).expanduser()
    had = present(root)
    if not had and not args.download:
        print(f"MNIST is not in {root.resolve()}/MNIST/raw/. Fetch it there (about 11 MB, needs internet) with "
              f"`python -m ponder data --download{f' --data-dir {args.data_dir}' if args.data_dir else ''}`, or put "
              f"the four MNIST .gz files there ({', '.join(f + '.gz' for f in MNIST_FILES)}).")
        return 1
    m = load_mnist(str(root), download=args.download)            # a failed download: DataError, one line (main)
    print(f"MNIST {'is' if had else 'downloaded'} in {root.resolve()}/MNIST/raw/: {len(m.train_y):,} training, "
          f"{len(m.val_y):,} validation and {len(m.test_y):,} test images. The explorer and the CLI read it from "
          f"there{'' if str(root) == 'data' else f' with PONDER_DATA={root} (or --data-dir {root})'}.")
    return 0
