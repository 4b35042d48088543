"""bench/ood.py: the generated inputs it measures the digit page's hint on (its full run needs MNIST and
minutes: `python -m bench.ood`)."""
import numpy as np

from bench import ood as B
from ponder import ood


def test_generated_non_digits_and_drawn_digits():
    rng = np.random.default_rng(0)
    x, y = B.drawn_digits(rng, per_digit=2)
    assert y == [d for d in range(10) for _ in range(2)]
    assert all(d.shape == (28, 28) and d.dtype == np.uint8 for d in x)
    assert ood.outside(ood.ink_stats(np.stack(x))).sum() <= 1            # drawn digits look like digits
    fams = B.non_digits(rng)
    assert set(fams) == {"dot", "specks", "flat line", "scribble", "tangle", "noise", "filled shape", "letter"}
    assert all(len(v) >= 32 for v in fams.values())
    assert ood.outside(ood.ink_stats(np.stack(fams["dot"]))).all()       # every dot is flagged
