"""A port on 127.0.0.1 that nothing listens on right now, for a server started next.

Picked from below the kernel's ephemeral range: the kernel hands ports from that range
to every outgoing connection and to every bind to port 0 (gRPC servers, Gloo, the tests
that run beside this one), and any of those could take a port picked there before the
server binds it. Run as a script, prints one port.
"""

import random
import socket

LOWEST = 10000


def free_port():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
        ephemeral_low = int(handle.read().split()[0])
    for _ in range(200):
        port = random.randrange(LOWEST, max(ephemeral_low, LOWEST + 1))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 between {LOWEST} and {ephemeral_low}")


if __name__ == "__main__":
    print(free_port())
