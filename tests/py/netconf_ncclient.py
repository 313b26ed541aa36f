"""ncclient (a real NETCONF client) against an emulated OpenConfig switch.

Usage: netconf_ncclient.py HOST PORT USER PASSWORD [--schema]

Run by tests/netconf_ncclient.rs, which starts the emulated device on
loopback. Every check raises AssertionError on failure (exit status 1);
each passed case prints "PASS <name>". With --schema (the device validates
against the OpenConfig YANG models) the schema error cases run too.
"""

import sys
import time

from ncclient import manager
from ncclient.operations import RPCError

HOST, PORT, USER, PASSWORD = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
SCHEMA = "--schema" in sys.argv[5:]

NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
IANAIFT = 'xmlns:ianaift="urn:ietf:params:xml:ns:yang:iana-if-type"'
NITYPES = 'xmlns:oc-ni-types="http://openconfig.net/yang/network-instance-types"'


def connect():
    return manager.connect(
        host=HOST,
        port=PORT,
        username=USER,
        password=PASSWORD,
        hostkey_verify=False,
        allow_agent=False,
        look_for_keys=False,
        timeout=30,
    )


def config(inner):
    return '<config xmlns="%s">%s</config>' % (NC, inner)


def iface(name, extra="", ipv4=""):
    return (
        '<interfaces xmlns="http://openconfig.net/yang/interfaces"><interface>'
        "<name>%s</name><config><name>%s</name>"
        "<type %s>ianaift:ethernetCsmacd</type>%s</config>%s</interface></interfaces>"
        % (name, name, IANAIFT, extra, ipv4)
    )


def v4(ip, length):
    return (
        "<subinterfaces><subinterface><index>0</index><config><index>0</index></config>"
        '<ipv4 xmlns="http://openconfig.net/yang/interfaces/ip"><addresses><address>'
        "<ip>%s</ip><config><ip>%s</ip><prefix-length>%s</prefix-length></config>"
        "</address></addresses></ipv4></subinterface></subinterfaces>" % (ip, ip, length)
    )


def vrf(name, ty="oc-ni-types:L3VRF"):
    return (
        '<network-instances xmlns="http://openconfig.net/yang/network-instance">'
        "<network-instance><name>%s</name><config><name>%s</name>"
        "<type %s>%s</type></config></network-instance></network-instances>"
        % (name, name, NITYPES, ty)
    )


def running(m):
    return m.get_config(source="running").data_xml


def refused(m, tag, inner, what):
    before = running(m)
    try:
        m.edit_config(target="candidate", config=config(inner))
    except RPCError as e:
        assert e.tag == tag, "%s: tag %r (%s), expected %r" % (what, e.tag, e.message, tag)
        m.discard_changes()
        assert running(m) == before, "%s: running changed" % what
        print("PASS refused %s -> %s (%s)" % (what, tag, (e.message or "").strip()[:80]))
        return
    raise AssertionError("%s: accepted, expected rpc-error %s" % (what, tag))


def main():
    m = connect()
    caps = list(m.server_capabilities)
    assert any("module=openconfig-interfaces" in c for c in caps), caps
    assert ":candidate" in m.server_capabilities
    assert ":confirmed-commit" in m.server_capabilities
    print("PASS hello: %d capabilities, module capabilities present" % len(caps))

    # get-config, edit-config on the candidate + commit.
    assert "Ethernet1" not in running(m)
    m.lock("candidate")
    m.edit_config(target="candidate", config=config(iface("Ethernet1", ipv4=v4("10.0.0.1", 31))))
    m.edit_config(target="candidate", config=config(vrf("JOB1")))
    assert "Ethernet1" not in running(m), "running changed before commit"
    m.commit()
    m.unlock("candidate")
    run = running(m)
    assert "Ethernet1" in run and "JOB1" in run and "10.0.0.1" in run, run
    print("PASS edit-config candidate + commit, lock/unlock")

    # Confirmed commit, then a confirming commit: stays.
    m.edit_config(target="candidate", config=config(vrf("JOB2")))
    m.commit(confirmed=True, timeout="2")
    assert "JOB2" in running(m)
    m.commit()
    time.sleep(3)
    assert "JOB2" in running(m), "a confirmed commit was rolled back"
    print("PASS confirmed commit + confirming commit")

    # Confirmed commit not confirmed: rolls back after the timeout.
    m.edit_config(target="candidate", config=config(vrf("JOB3")))
    m.commit(confirmed=True, timeout="2")
    assert "JOB3" in running(m)
    time.sleep(4)
    run = running(m)
    assert "JOB3" not in run and "JOB2" in run, run
    print("PASS unconfirmed commit rolled back after its timeout")

    # Locks: a second session is refused, kill-session frees the lock.
    other = connect()
    other.lock("candidate")
    try:
        m.lock("candidate")
        raise AssertionError("lock granted while another session holds it")
    except RPCError as e:
        assert e.tag == "lock-denied", e.tag
    m.kill_session(other.session_id)
    m.lock("candidate")
    m.unlock("candidate")
    deadline = time.time() + 10
    while other.connected and time.time() < deadline:
        time.sleep(0.1)
    assert not other.connected, "the killed session is still connected"
    print("PASS kill-session released the lock and closed the session")

    # copy-config: running -> candidate after a candidate edit.
    m.edit_config(target="candidate", config=config(vrf("JOB4")))
    m.copy_config(source="running", target="candidate")
    cand = m.get_config(source="candidate").data_xml
    assert "JOB4" not in cand and "JOB2" in cand, cand
    print("PASS copy-config running -> candidate")

    # delete-config of running is refused.
    before = running(m)
    try:
        m.delete_config(target="running")
        raise AssertionError("delete-config running accepted")
    except RPCError as e:
        assert e.tag == "operation-not-supported", e.tag
    assert running(m) == before
    print("PASS delete-config running refused (operation-not-supported)")

    # Always: a namespace the device does not implement.
    refused(m, "unknown-namespace", '<widgets xmlns="urn:example:widgets"><w/></widgets>', "unknown namespace")
    if SCHEMA:
        refused(m, "unknown-element", iface("Ethernet1", "<colour>red</colour>"), "unknown leaf")
        refused(m, "invalid-value", vrf("JOB5", "oc-ni-types:NOT_AN_IDENTITY"), "bad identity")
        refused(m, "invalid-value", iface("Ethernet1", ipv4=v4("10.0.0.1", 99)), "prefix-length 99")
        refused(m, "invalid-value", iface("Ethernet1", ipv4=v4("999.1.1.1", 31)), "address 999.1.1.1")
    m.close_session()
    print("ALL PASSED")


if __name__ == "__main__":
    main()
