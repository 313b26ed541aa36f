"""Drive an emulated Huawei CE switch with netmiko's `huawei_vrpv8` driver.

Usage: netmiko_ce.py PORT USER PASSWORD

Connects to 127.0.0.1:PORT, configures an interface description and a
next-hop traffic behavior with `send_config_set`, commits, reads
`display current-configuration`, then sends an invalid command with
`error_pattern` set. Prints one JSON object with what it saw; exits 0
unless the client itself fails.
"""

import json
import sys

from netmiko import ConnectHandler
from netmiko.exceptions import ConfigInvalidException


def main() -> int:
    port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    conn = ConnectHandler(
        device_type="huawei_vrpv8",
        host="127.0.0.1",
        port=port,
        username=user,
        password=password,
        fast_cli=False,
        conn_timeout=10,
        auth_timeout=10,
        banner_timeout=10,
        read_timeout_override=10,
        use_keys=False,
        allow_agent=False,
    )
    out = {"base_prompt": conn.base_prompt}
    out["config_set"] = conn.send_config_set(
        [
            "interface 100GE1/0/1",
            "description netmiko-was-here",
            "quit",
            "traffic behavior nm-b1",
            "redirect nexthop 10.0.0.1",
            "quit",
        ],
        error_pattern=r"Error:",
    )
    out["prompt_before_commit"] = conn.find_prompt()
    out["commit"] = conn.commit()
    out["prompt_after_commit"] = conn.find_prompt()
    out["running"] = conn.send_command("display current-configuration")
    try:
        conn.send_config_set(
            ["interface 100GE1/0/1", "ip address 10.0.0.300 31"],
            error_pattern=r"Error:",
        )
        out["invalid"] = None
    except ConfigInvalidException as e:
        out["invalid"] = str(e)
    # The same line without error_pattern: the device's own reply.
    out["invalid_output"] = conn.send_config_set(
        ["interface 100GE1/0/1", "ip address 10.0.0.300 31"]
    )
    # Leave the candidate clean and the session in user view.
    conn.send_command_timing("clear configuration candidate")
    conn.send_command_timing("return")
    conn.disconnect()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
