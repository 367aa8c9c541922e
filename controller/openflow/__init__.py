"""os-ken glue and the OpenFlow listener: TLS, admission of switches, message guards, the app that
binds the runtime's messages to live datapaths. The only package that imports os_ken.controller.
"""
