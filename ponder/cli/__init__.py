"""The command line, `python -m ponder` or `ponder`: main (the commands train / evaluate / sweep / study /
reproduce), args (the parser and the config flags), evaluate, sweep, reproduce (the results tables) and
results_worth (their is-pondering-worth-it section)."""
