"""The same work as xmlbench/main.go with Python's xml.etree.ElementTree:
load, turn TSO offload on (remove <disablesegmentationoffloading>), save."""
import resource
import sys
import time
import xml.etree.ElementTree as ET

start = time.perf_counter()
tree = ET.parse(sys.argv[1])
system = tree.getroot().find("system")
flag = system.find("disablesegmentationoffloading")
if flag is not None:
    system.remove(flag)
tree.write(sys.argv[2], encoding="utf-8", xml_declaration=True)
elapsed = time.perf_counter() - start
print(f"{elapsed:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
