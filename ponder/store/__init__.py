"""Where runs live on disk (atomic writes and folder locks: ponder.files): the run card and its one reader (card),
the weights (checkpoint), the runs folder (runs), uploaded runs (uploads) and rename / delete / export /
import (manage)."""
