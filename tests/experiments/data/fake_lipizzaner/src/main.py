"""A stand-in for Lipizzaner's ``main.py`` (tests of lipizzaner_side_by_side.py only).

``train --distributed --client``: takes the first free port from 5000 (as Lipizzaner's
clients do), reads ``n_iterations`` from the config the benchmark wrote, and logs
Lipizzaner's progress lines (3 batches per iteration, each 0.2 CPU-seconds of work) to stderr in
its log format, each iteration followed by a mixture score of 0.3 s. ``--master``: waits
until it is stopped, like a master that outlives the run.
"""

import logging
import re
import socket
import sys
import time
from pathlib import Path

logging.basicConfig(format="%(asctime)s %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
log = logging.getLogger("training.ea.lipizzaner_gan_trainer")

if "--master" in sys.argv:
  while True:
    time.sleep(1)

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as flask binds
port = 5000
while True:
  try:
    server.bind(("127.0.0.1", port))
    break
  except OSError:
    port += 1
server.listen()
config = Path("configuration/lipizzaner-gan/side_by_side.yml").read_text()
iterations = int(re.search(r"n_iterations: (\d+)", config)[1])
for it in range(1, iterations + 1):
  for b in range(3):  # numbered from 0, as Lipizzaner's
    t = time.process_time()
    while time.process_time() - t < 0.2:
      pass
    log.info("Iteration %d, Batch %d/3", it, b)
  log.info("Calculating FID/inception score.")  # the mixture score: 0.3 s here
  time.sleep(0.3)
  log.info("Iteration=%d, f(Generator(x))=0.69", it)
while True:  # a client serves on after training until the master lets it go
  time.sleep(1)
