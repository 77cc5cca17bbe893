# Run under `heapkit guard` by CTest: hashes, arrays, strings, regexes, sort.
use strict;
use warnings;
my %h;
$h{$_} = [($_) x 4] for 1 .. 20000;
my $s = join(',', sort { $a <=> $b } keys %h);
my @w = ($s =~ /(\d+7)\b/g);
my $t = '';
$t .= sprintf("%05d;", $_) for 1 .. 5000;
print "perl ok ", length($s), " ", scalar(@w), " ", length($t), "\n";
