"""What the websocket tests share."""

# How long a frame or a close may take to arrive: a bound on a hang, not a speed (a loaded machine took over 10 s to
# notice a Redis stopped under an open socket); the order and content of what arrives are what the tests show.
WAIT = 120
