"""os-ken glue and the OpenFlow listener: TLS, admission of switches, message guards, the app that
binds the runtime's messages to live datapaths. The only package that imports os_ken.controller.
The glue calls one declared ``events.SwitchEvents`` (the runtime, or a cluster node's role-aware
``roles.RoleController``); ``embedded.EmbeddedController`` holds a runtime and runs the listener.

Modules: ``admission``, ``app``, ``denylist``, ``echo``, ``embedded``, ``events``, ``flowstats``, ``guard``,
``handler``, ``handshakes``, ``launcher``, ``listener``, ``peerauth``, ``preadmit``, ``punts``,
``roles``, ``server``, ``tablesizes``, ``tls``, ``tlsdiag``, ``write``.

Imports today: pki, topologies. Never (.importlinter): click, tests, api, authz, cli, client, cluster,
lab, lanes, policy, store.
"""
