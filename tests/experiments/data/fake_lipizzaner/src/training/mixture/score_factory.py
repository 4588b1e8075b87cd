# stand-in: the line the benchmark patches, as in Lipizzaner's score_factory.py
OP = "transforms.Normalize(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))"
