# stand-in: the call the benchmark patches, split over two lines as in Lipizzaner's
# data/data_loader.py
TRANSFORM = """transforms.Normalize(mean=(0.5, 0.5, 0.5),
                                  std=(0.5, 0.5, 0.5))"""
